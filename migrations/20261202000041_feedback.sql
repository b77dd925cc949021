-- The feedback queue: items people judge (rank a group's answers, rate one, compare two), each
-- seen by `overlap` different people, never twice by the same one.

CREATE TABLE feedback_queues (
    id         BIGSERIAL PRIMARY KEY,
    -- The team whose members see and judge it; NULL for a queue the server's admin opened.
    team_id    BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('rank', 'rate', 'compare')),
    guidelines TEXT NOT NULL CHECK (char_length(guidelines) <= 20000),
    overlap    INTEGER NOT NULL CHECK (overlap BETWEEN 1 AND 20),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT feedback_queues_name_unique UNIQUE (name),
    CONSTRAINT feedback_queues_name_length CHECK (char_length(name) BETWEEN 1 AND 80)
);

CREATE TABLE feedback_items (
    id         BIGSERIAL PRIMARY KEY,
    queue_id   BIGINT NOT NULL REFERENCES feedback_queues (id) ON DELETE CASCADE,
    prompt     TEXT NOT NULL CHECK (char_length(prompt) <= 20000),
    answers    TEXT[] NOT NULL CHECK (cardinality(answers) BETWEEN 1 AND 16),
    source     TEXT CHECK (char_length(source) <= 200),
    -- Judgements so far, kept by the same statement that adds one (for assignment by fewest).
    judged     INTEGER NOT NULL DEFAULT 0 CHECK (judged >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX feedback_items_by_queue ON feedback_items (queue_id, judged, id);

CREATE TABLE feedback_judgements (
    id         BIGSERIAL PRIMARY KEY,
    item_id    BIGINT NOT NULL REFERENCES feedback_items (id) ON DELETE CASCADE,
    annotator  BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    judgement  JSONB NOT NULL CHECK (judgement ->> 'kind' IN ('rank', 'rate', 'compare')),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Nobody judges an item twice.
    CONSTRAINT feedback_judgements_once UNIQUE (item_id, annotator)
);
CREATE INDEX feedback_judgements_by_annotator ON feedback_judgements (annotator);
