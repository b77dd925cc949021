-- A Pay-to-Play round's item takes verdicts only until its round's deadline: an item whose round
-- died with its process would otherwise stay open, and people would rank it for nothing.
ALTER TABLE feedback_items ADD COLUMN closes_at TIMESTAMPTZ;
