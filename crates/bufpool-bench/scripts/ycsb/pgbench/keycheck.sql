-- The peer script's check that pgbench's keys are the loaded ones (-D records=N): a
-- record drawn uniformly must be found (a missing one divides by zero, and pgbench fails).
\set keynum random(0, :records - 1)
\set h abs(hash_fnv1a(:keynum, 0))
SELECT 1 / count(*) FROM usertable WHERE ycsb_key = 'user' || :h;
