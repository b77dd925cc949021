-- Which of its round's answers an evaluation scores. A paid evaluation is recorded once per
-- payment and answer, so a round replayed after its first attempt paid but was cut off before
-- recording records it then, and a round recorded already records nothing again. Evaluations
-- stored before the column existed are numbered in the order they were written, which is their
-- answers' order.
ALTER TABLE card_evaluations ADD COLUMN answer INTEGER;
UPDATE card_evaluations e SET answer = numbered.answer
FROM (SELECT id, row_number() OVER (PARTITION BY paid_tx ORDER BY id) - 1 AS answer
      FROM card_evaluations WHERE paid_tx IS NOT NULL) numbered
WHERE e.id = numbered.id;
ALTER TABLE card_evaluations ADD CONSTRAINT card_evaluations_answer_named
    CHECK (answer >= 0 AND (paid_tx IS NULL OR answer IS NOT NULL));
ALTER TABLE card_evaluations ADD CONSTRAINT card_evaluations_once_per_answer
    UNIQUE (paid_tx, answer);
