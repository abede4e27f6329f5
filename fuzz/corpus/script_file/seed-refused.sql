BEGIN;
DELETE FROM pgbench_accounts;
