-- YCSB's usertable on PostgreSQL for `bufpool compare --workload ycsb-a` .. `ycsb-f`, run
-- by scripts/postgres-peer.sh with psql -v records=N: the table as YCSB's JDBC binding
-- makes it (a text key, the primary key, in byte order as bufpool's and SQLite's keys are,
-- and ten text fields), the records bufpool's `init --workload ycsb --records N` loads
-- (record k's key is `user` and the decimal FNV-1a hash of k, YCSB's hashed insert order;
-- each field 100 random lowercase letters), the sequence inserts take their record
-- numbers from, and the constants of YCSB's Zipfian generator (Gray et al.'s method, as
-- YCSB's ZipfianGenerator draws) that the pgbench scripts beside this file read.
\set ON_ERROR_STOP on

-- YCSB's fnvhash64 of record number k: FNV-1a over its eight bytes, low byte first, as
-- a signed 64-bit number made non-negative (pgbench's abs(hash_fnv1a(k, 0)) is the same;
-- the peer script checks that the two agree). Numeric arithmetic stands in for unsigned
-- 64-bit wrapping multiplication.
CREATE FUNCTION ycsb_fnv(k bigint) RETURNS numeric LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  h numeric := 14695981039346656037;
  v bigint := k;
  low int;
BEGIN
  FOR i IN 1..8 LOOP
    low := mod(h, 256)::int;
    h := h - low + (low # (v & 255)::int);
    v := v >> 8;
    h := mod(h * 1099511628211, 18446744073709551616);
  END LOOP;
  IF h >= 9223372036854775808 THEN
    h := 18446744073709551616 - h;
  END IF;
  RETURN h;
END $$;

-- A field's value: 100 lowercase letters, a random md5 digest's 32 (its digits mapped onto
-- letters) repeated; the updates and inserts of the pgbench scripts call it too. Rows are
-- too short for PostgreSQL to compress (it tries from 2 kB), so only the length matters,
-- and one digest a field loads three times faster than four.
CREATE FUNCTION ycsb_field() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT substr(repeat(translate(md5(random()::text), '0123456789', 'qrstuvwxyz'), 4), 1, 100)
$$;

CREATE TABLE usertable (
  ycsb_key text COLLATE "C" PRIMARY KEY,
  field0 text, field1 text, field2 text, field3 text, field4 text,
  field5 text, field6 text, field7 text, field8 text, field9 text);

INSERT INTO usertable
  SELECT 'user' || ycsb_fnv(k), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(),
    ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field(), ycsb_field()
  FROM generate_series(0, :records - 1) k;

-- Inserts (workloads D and E) take the record numbers after the loaded ones.
CREATE SEQUENCE ycsb_next START :records MINVALUE 0;

-- The Zipfian generator's constants for the loaded records (theta 0.99, YCSB's): zetan,
-- the sum of 1/i^theta for i = 1..N; zeta2, that sum for N = 2; alpha = 1/(1 - theta);
-- eta = (1 - (2/N)^(1 - theta)) / (1 - zeta2/zetan). The peer script passes them to
-- pgbench with -D.
CREATE TABLE ycsb_zipf AS
  SELECT z.zetan, z.zeta2, 1 / (1 - 0.99::float8) AS alpha,
    -- (with two records eta is never used, and 0 stands in for its division by zero)
    coalesce((1 - power(2.0::float8 / :records, 1 - 0.99::float8))
      / nullif(1 - z.zeta2 / z.zetan, 0), 0) AS eta
  FROM (SELECT sum(power(i::float8, -0.99::float8)) AS zetan,
          1 + power(2::float8, -0.99::float8) AS zeta2
        FROM generate_series(1, :records) i) z;

VACUUM ANALYZE usertable;
CHECKPOINT;
