-- Triggers act on behalf of the member who made them (issue 28): a schedule or webhook whose
-- maker left the workspace, or was demoted below operator, is paused (`paused_reason`
-- 'creator_left') until an admin resumes it — who then stands behind it (`created_by`).
ALTER TABLE schedules ADD COLUMN paused_reason text;
ALTER TABLE webhooks
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN paused_reason text;
