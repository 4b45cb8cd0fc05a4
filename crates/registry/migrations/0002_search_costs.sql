-- Typo search that the planner serves from the trigram index at any plan.
--
-- pg_trgm declares its similarity functions as cheap as an integer comparison (COST 1), so for
-- a query whose trigrams are common a custom plan chose a sequential scan that computes
-- word_similarity on every row (~10 µs each: 150-210 ms at 10,000 apps, against 25-45 ms
-- through the index). Their real cost makes the planner weigh that scan honestly. Changing an
-- extension's function needs its owner; without that the registry warns at start.
DO $$
BEGIN
    ALTER FUNCTION word_similarity(text, text) COST 100;
    ALTER FUNCTION word_similarity_op(text, text) COST 100;
    ALTER FUNCTION word_similarity_commutator_op(text, text) COST 100;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'pg_trgm''s functions belong to another role: run crates/registry/migrations/0002_search_costs.sql as their owner, or typo searches may scan every app';
END
$$;

-- Typo targets: the app's own name, aliases and tool names and the last label of its id. The
-- id's namespace labels (`com`, `acme`) are shared by every app of a publisher, so as typo
-- targets they made a search for an app id match every app under it. (Full text still
-- indexes the whole id.)
UPDATE apps SET words = lower(
    regexp_replace(app_id, '^.*\.', '') || ' ' || name || ' ' || array_to_string(aliases, ' ')
    || ' ' || array_to_string(tools, ' '));
