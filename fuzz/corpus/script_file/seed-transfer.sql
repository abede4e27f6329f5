-- a custom script: a transfer between two accounts
\set a random(1, 100000 * :scale)
\set b random_zipfian(1, 100000 * :scale, 1.1)
\set d random(1, 100)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance - :d WHERE aid = :a;
UPDATE pgbench_accounts SET abalance = abalance + :d WHERE aid = :b;
SELECT abalance FROM pgbench_accounts WHERE aid = :a;
END;
\sleep 1 ms
