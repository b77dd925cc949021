-- The spatial arena: two contenders place the same scene's objects, and the physics judges them.
ALTER TABLE arena_battles DROP CONSTRAINT arena_battles_arena_check;
ALTER TABLE arena_battles ADD CONSTRAINT arena_battles_arena_known
    CHECK (arena IN ('catbot', 'arithmetic', 'spatial'));
