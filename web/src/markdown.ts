// Markdown from agents, rendered inert: markdown-it with raw HTML off (tags come out as text),
// links only to http(s): and mailto: (anything else stays plain text), and images never loaded:
// a remote image becomes a link, so a message cannot leak data through an image URL.
import MarkdownIt from 'markdown-it';

const SAFE_LINK = /^(https?:|mailto:)/i;

const md = new MarkdownIt({ html: false, linkify: true, breaks: false, typographer: false });

md.validateLink = (url: string) => SAFE_LINK.test(url.trim());

const defaultLinkOpen =
  md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  token.attrSet('target', '_blank');
  token.attrSet('rel', 'noopener noreferrer nofollow');
  return defaultLinkOpen(tokens, idx, options, env, self);
};

md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const src = String(token.attrGet('src') ?? '');
  const alt = md.utils.escapeHtml(String(token.content || 'image'));
  if (!SAFE_LINK.test(src)) return `[image: ${alt}]`;
  return `<a class="md-image" href="${md.utils.escapeHtml(src)}" target="_blank" rel="noopener noreferrer nofollow">[image: ${alt}]</a>`;
};

/** HTML for a markdown text (safe to insert: markdown-it escapes everything else). */
export function renderMarkdown(text: string): string {
  return md.render(text);
}
