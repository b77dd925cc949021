-- Each queue counts its items, so the per-queue cap (`--feedback-queue-items`) is checked under
-- the queue row's lock by the statement that adds them.
ALTER TABLE feedback_queues ADD COLUMN items INTEGER NOT NULL DEFAULT 0;
UPDATE feedback_queues q SET items = (SELECT count(*) FROM feedback_items i WHERE i.queue_id = q.id);
ALTER TABLE feedback_queues ADD CONSTRAINT feedback_queues_items_nonnegative CHECK (items >= 0);
