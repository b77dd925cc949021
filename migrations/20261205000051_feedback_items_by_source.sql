-- A Pay-to-Play round names its episode in its item's source; a replay of the episode looks up
-- the items an earlier attempt left in the queue by it.
CREATE INDEX feedback_items_by_source ON feedback_items (queue_id, source) WHERE source IS NOT NULL;
