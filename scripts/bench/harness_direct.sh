#!/usr/bin/env bash
# harness_direct.sh CERTS IMAGE [ROUNDS] — each real harness (Claude Code, Codex, OpenCode) run
# DIRECTLY, without agenthold: `docker run -i` of IMAGE with the harness's ACP command on stdio,
# driven by harness_direct.py (initialize, session/new, set_mode, prompt "hello", then a second
# prompt on the same process), ROUNDS times each (default 1). Prints one JSON object:
# <harness>_direct_first_update_ms (cold, from `docker run`) and
# <harness>_direct_warm_first_update_ms and <harness>_direct_after_init_first_update_ms (from the
# `initialize` answer to the first prompt's first update: session/new, set_mode, prompt — what a
# harness the warm pool started would do without its spare session) and
# <harness>_direct_new_session_prompt_first_update_ms (the first prompt of a session just opened,
# from its sending to its first update: what a pooled harness still does),
# <harness>_direct_first_text_after_prompt_ms, <harness>_direct_warm_first_text_after_prompt_ms and
# <harness>_direct_new_session_first_text_after_prompt_ms (from the sending of the process's first
# prompt, of a second in the same session, and of the first in a session opened after them, to
# the model's first text: the harness's own floor for a pooled agent's first text — the first
# prompt for a pooled Claude Code or Codex, the new session's for a pooled OpenCode, which ran a
# warm-up turn) (medians); each run's phases in
# CERTS/../direct/runs.jsonl.
#
# The provider's stand-in (scripts/e2e/standins, the same script and certificate as through
# agenthold) runs in a holder container without a network, on 127.0.0.1:443 under the provider's
# real host name (--add-host); the harness container joins the holder's network namespace, so
# it keeps its default provider URL and nothing can leave the machine. The holder's resolver
# (harness_direct.py --dns-stub) answers every other name NXDOMAIN at once, as the egress proxy
# refuses any other host at once. The stand-in's root CA is trusted the way sandboxd trusts the
# proxy's (the same files and variables). A run whose stand-in recorded no request is invalid (null).
#
# Knobs (environment): DIRECT_HARNESSES (default "claude-code codex opencode": which to run);
# DIRECT_ARGS_<harness, - as _> (more harness_direct.py arguments for that harness, split on
# spaces, e.g. DIRECT_ARGS_codex="--env CODEX_CONFIG={...}"; or "@FILE", its arguments one a
# line, for values with spaces: --argv '["codex-acp"]' runs Codex as before codex.rs's
# CATALOG_CONFIG); DIRECT_SAVE_HOME=1 (each Codex run's ~/.codex copied to
# CERTS/../direct/codex-<round>.home, with a consistent logs_2.sqlite.snapshot: Codex's log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
certs=${1:?usage: $0 CERTS IMAGE [ROUNDS]}
image=${2:?usage: $0 CERTS IMAGE [ROUNDS]}
rounds=${3:-1}
work=$(cd "$certs/.." && pwd)/direct
label=agenthold.bench-direct=$$
rm -rf "$work"
mkdir -p "$work/certs"
cleanup() { docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1 || true; }
trap cleanup EXIT

# Before any clock: the (throwaway) certificates readable by the containers' remapped users, and
# the image's bundle with the stand-in's CA (what update-ca-certificates makes in a sandbox).
cp "$certs/root.pem" "$certs/leaf.pem" "$certs/leaf.key" "$work/certs/"
docker run --rm --network none "$image" cat /etc/ssl/certs/ca-certificates.crt >"$work/certs/bundle.pem"
cat "$certs/root.pem" >>"$work/certs/bundle.pem"
chmod 755 "$work/certs"
chmod 644 "$work/certs"/*
chmod 777 "$work"
for provider in anthropic openai; do
    docker run -d --rm --label "$label" --network none --dns 127.0.0.1 --add-host "api.$provider.com:127.0.0.1" \
        -v "$here/../e2e/standins:/standins:ro" -v "$here:/bench:ro" -v "$work:/w" "$image" sh -c \
        "python3 /bench/harness_direct.py --dns-stub /w/dns-$provider.jsonl & exec python3 /standins/$provider.py \
         --cert /w/certs/leaf.pem --key /w/certs/leaf.key --port 443 --ready /w/$provider.port --record /w/$provider.jsonl" \
        >"$work/holder-$provider" 2>>"$work/docker.log"
done
for _ in $(seq 100); do [[ -s $work/anthropic.port && -s $work/openai.port ]] && break; sleep 0.1; done
[[ -s $work/anthropic.port && -s $work/openai.port ]] || { echo "the stand-ins did not start" >&2; exit 1; }

for round in $(seq "$rounds"); do
    for harness in ${DIRECT_HARNESSES:-claude-code codex opencode}; do
        provider=$([[ $harness == codex ]] && echo openai || echo anthropic)
        extra_var=DIRECT_ARGS_${harness//-/_}
        read -r -a extra <<<"${!extra_var:-}"
        if [[ ${DIRECT_SAVE_HOME:-0} == 1 && $harness == codex ]]; then
            extra+=(--save-dir ".codex:$work/$harness-$round.home")
        fi
        python3 "$here/harness_direct.py" "$harness" "$(cat "$work/holder-$provider")" "$image" \
            "$work/$provider.jsonl" "$work/certs" --label "$label" --name "bench-direct-$$-$harness" \
            --stderr "$work/$harness-$round.stderr" ${extra[@]+"${extra[@]}"} | jq -c --argjson n "$round" '. + {round: $n}' >>"$work/runs.jsonl"
        tail -n 1 "$work/runs.jsonl" | jq -r '"\(.harness) direct (round \(.round)): first update \(.first_update_ms) ms cold (\(.first_update_kind)), \(.warm_first_update_ms) ms warm; \(.requests) + \(.warm_requests) requests at the stand-in\(if .error then "; error: " + .error else "" end)"' >&2
    done
done

# A run counts only if the stand-in recorded its prompt's request (else its figure is null).
jq -cs 'def median: map(select(. != null)) | sort | if length == 0 then null
          elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        group_by(.harness) | map((.[0].harness | gsub("-"; "_")) as $h | {
          ($h + "_direct_first_update_ms"): (map(select((.requests // 0) > 0) | .first_update_ms) | median),
          ($h + "_direct_warm_first_update_ms"): (map(select((.warm_requests // 0) > 0) | .warm_first_update_ms) | median),
          ($h + "_direct_after_init_first_update_ms"): (map(select((.requests // 0) > 0 and .initialize_at_ms != null)
            | .first_update_ms - .initialize_at_ms | round) | median),
          ($h + "_direct_new_session_prompt_first_update_ms"): (map(select((.requests // 0) > 0
              and .first_update_after_prompt_at_ms != null and .prompt_sent_at_ms != null)
            | .first_update_after_prompt_at_ms - .prompt_sent_at_ms | round) | median),
          ($h + "_direct_first_text_after_prompt_ms"): (map(select((.requests // 0) > 0)
            | .first_text_after_prompt_ms) | median),
          ($h + "_direct_warm_first_text_after_prompt_ms"): (map(select((.warm_requests // 0) > 0)
            | .warm_first_text_after_prompt_ms) | median),
          ($h + "_direct_new_session_first_text_after_prompt_ms"): (map(select((.new_session_requests // 0) > 0)
            | .new_session_first_text_after_prompt_ms) | median)
        }) | add' "$work/runs.jsonl"
