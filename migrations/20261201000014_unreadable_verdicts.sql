-- A card that was paid but whose verdict could not be read still had its evaluation: it is
-- recorded with no score, so it counts as a pull worth nothing to the bandit (otherwise a card
-- that never answers readably stays "untried" and is chosen, and paid, every round).
ALTER TABLE card_evaluations ALTER COLUMN score DROP NOT NULL;
