-- TPC-C (revision 5.11) on PostgreSQL for `bufpool compare --workload tpcc`, run by
-- scripts/postgres-peer.sh with psql -v warehouses=W: the nine tables with the
-- specification's types and keys (clause 1.3), the load (clause 4.3.3.1: the same
-- cardinalities as `bufpool init --workload tpcc`; strings from md5 digests, which are
-- letters and digits of the same lengths), and the five transactions as PL/pgSQL
-- functions that the pgbench scripts beside this file call, one call per transaction.
-- The transactions do the work of bufpool's (crates/bufpool-bench/src/tpcc/txns.rs):
-- the same statements in the same order, the order lines' stock updated in item order.
\set ON_ERROR_STOP on

CREATE TABLE warehouse (
  w_id int PRIMARY KEY, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20),
  w_city varchar(20), w_state char(2), w_zip char(9), w_tax numeric(4,4), w_ytd numeric(12,2));
CREATE TABLE district (
  d_id int, d_w_id int, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20),
  d_city varchar(20), d_state char(2), d_zip char(9), d_tax numeric(4,4), d_ytd numeric(12,2),
  d_next_o_id int, PRIMARY KEY (d_w_id, d_id));
CREATE TABLE customer (
  c_id int, c_d_id int, c_w_id int, c_first varchar(16), c_middle char(2), c_last varchar(16),
  c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2),
  c_zip char(9), c_phone char(16), c_since timestamp, c_credit char(2), c_credit_lim numeric(12,2),
  c_discount numeric(4,4), c_balance numeric(12,2), c_ytd_payment numeric(12,2),
  c_payment_cnt int, c_delivery_cnt int, c_data varchar(500),
  PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE history (
  h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date timestamp,
  h_amount numeric(6,2), h_data varchar(24));
CREATE TABLE new_order (
  no_o_id int, no_d_id int, no_w_id int, PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (
  o_id int, o_d_id int, o_w_id int, o_c_id int, o_entry_d timestamp, o_carrier_id int,
  o_ol_cnt int, o_all_local int, PRIMARY KEY (o_w_id, o_d_id, o_id));
CREATE TABLE order_line (
  ol_o_id int, ol_d_id int, ol_w_id int, ol_number int, ol_i_id int, ol_supply_w_id int,
  ol_delivery_d timestamp, ol_quantity int, ol_amount numeric(6,2), ol_dist_info char(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item (
  i_id int PRIMARY KEY, i_im_id int, i_name varchar(24), i_price numeric(5,2), i_data varchar(50));
CREATE TABLE stock (
  s_i_id int, s_w_id int, s_quantity int, s_dist_01 char(24), s_dist_02 char(24),
  s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24),
  s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24),
  s_ytd int, s_order_cnt int, s_remote_cnt int, s_data varchar(50),
  PRIMARY KEY (s_w_id, s_i_id));

-- A random string of lo..hi letters and digits.
CREATE FUNCTION tpcc_str(lo int, hi int) RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT substr(repeat(md5(random()::text), 16), 1, lo + floor(random() * (hi - lo + 1))::int) $$;
-- Item or stock data: 26 to 50 characters, one in ten holding ORIGINAL.
CREATE FUNCTION tpcc_data() RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT CASE WHEN random() < 0.1
   THEN overlay(s PLACING 'ORIGINAL' FROM 1 + floor(random() * (length(s) - 7))::int)
   ELSE s END FROM tpcc_str(26, 50) AS s $$;
-- Customer last name number n (0..999) from its digits' syllables (clause 4.3.2.3).
CREATE FUNCTION tpcc_last(n int) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT s[n / 100 + 1] || s[n / 10 % 10 + 1] || s[n % 10 + 1]
   FROM (SELECT ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'] AS s) a $$;
-- NURand(A, x, y) with constant c (clause 2.1.6).
CREATE FUNCTION tpcc_nurand(a int, x int, y int, c int) RETURNS int LANGUAGE sql VOLATILE AS
$$ SELECT (((floor(random() * (a + 1))::int | (x + floor(random() * (y - x + 1))::int)) + c)
   % (y - x + 1)) + x $$;

-- ------------------------------------------------------------------ load
-- The load's NURand constant for last names is 157; the pgbench scripts' run constant is
-- 87 (their distance, 70, is one clause 2.1.6.1 allows).
INSERT INTO item SELECT i, 1 + floor(random() * 10000)::int, tpcc_str(14, 24),
  (100 + floor(random() * 9901)) / 100.0, tpcc_data() FROM generate_series(1, 100000) i;
INSERT INTO warehouse SELECT w, tpcc_str(6, 10), tpcc_str(10, 20), tpcc_str(10, 20),
  tpcc_str(10, 20), tpcc_str(2, 2), lpad(floor(random() * 10000)::text, 4, '0') || '11111',
  floor(random() * 2001) / 10000.0, 300000 FROM generate_series(1, :warehouses) w;
INSERT INTO stock SELECT i, w, 10 + floor(random() * 91)::int, tpcc_str(24, 24),
  tpcc_str(24, 24), tpcc_str(24, 24), tpcc_str(24, 24), tpcc_str(24, 24), tpcc_str(24, 24),
  tpcc_str(24, 24), tpcc_str(24, 24), tpcc_str(24, 24), tpcc_str(24, 24), 0, 0, 0, tpcc_data()
  FROM generate_series(1, :warehouses) w, generate_series(1, 100000) i;
INSERT INTO district SELECT d, w, tpcc_str(6, 10), tpcc_str(10, 20), tpcc_str(10, 20),
  tpcc_str(10, 20), tpcc_str(2, 2), lpad(floor(random() * 10000)::text, 4, '0') || '11111',
  floor(random() * 2001) / 10000.0, 30000, 3001
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d;
INSERT INTO customer SELECT c, d, w, tpcc_str(8, 16), 'OE',
  tpcc_last(CASE WHEN c <= 1000 THEN c - 1 ELSE tpcc_nurand(255, 0, 999, 157) END),
  tpcc_str(10, 20), tpcc_str(10, 20), tpcc_str(10, 20), tpcc_str(2, 2),
  lpad(floor(random() * 10000)::text, 4, '0') || '11111',
  lpad(floor(random() * 1e16)::bigint::text, 16, '0'), now(),
  CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000, floor(random() * 5001) / 10000.0,
  -10, 10, 1, 0, tpcc_str(300, 500)
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO history SELECT c, d, w, d, w, now(), 10, tpcc_str(12, 24)
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d, generate_series(1, 3000) c;
INSERT INTO orders SELECT o, d, w, c, now(),
  CASE WHEN o < 2101 THEN 1 + floor(random() * 10)::int END, 5 + floor(random() * 11)::int, 1
  FROM (SELECT w, d, o, row_number() OVER (PARTITION BY w, d ORDER BY random()) AS c
        FROM generate_series(1, :warehouses) w, generate_series(1, 10) d,
             generate_series(1, 3000) o) p;
INSERT INTO order_line SELECT o_id, o_d_id, o_w_id, n, 1 + floor(random() * 100000)::int,
  o_w_id, CASE WHEN o_id < 2101 THEN o_entry_d END, 5,
  CASE WHEN o_id < 2101 THEN 0 ELSE (1 + floor(random() * 999999)) / 100.0 END, tpcc_str(24, 24)
  FROM orders, generate_series(1, 15) n WHERE n <= o_ol_cnt;
INSERT INTO new_order SELECT o, d, w
  FROM generate_series(1, :warehouses) w, generate_series(1, 10) d, generate_series(2101, 3000) o;
CREATE INDEX customer_last ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
VACUUM ANALYZE;

-- ------------------------------------------------------------------ transactions
-- New-Order (clause 2.4.2). Returns 1 when the order is placed, 0 when an item was not
-- there (the unused item of the 1% that roll back): the caller then ROLLBACKs.
CREATE FUNCTION tpcc_new_order(w int, d int, c int, ol_cnt int, rbk int, warehouses int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  items int[]; supply int[]; qty int[]; line record;
  w_tax numeric; d_tax numeric; o int; disc numeric; total numeric := 0;
  price numeric; dist char(24); remote int;
BEGIN
  SELECT array_agg(i ORDER BY i, s), array_agg(s ORDER BY i, s), array_agg(q ORDER BY i, s)
    INTO items, supply, qty
    FROM (SELECT CASE WHEN rbk = 1 AND n = ol_cnt THEN 100001 ELSE tpcc_nurand(8191, 1, 100000, 5381) END AS i,
                 CASE WHEN warehouses > 1 AND random() < 0.01
                      THEN 1 + (w + floor(random() * (warehouses - 1))::int) % warehouses ELSE w END AS s,
                 1 + floor(random() * 10)::int AS q
          FROM generate_series(1, ol_cnt) n) l;
  SELECT warehouse.w_tax INTO w_tax FROM warehouse WHERE w_id = w;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d
    RETURNING district.d_tax, d_next_o_id - 1 INTO d_tax, o;
  SELECT c_discount INTO disc FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
  INSERT INTO orders VALUES (o, d, w, c, now(), NULL, ol_cnt,
    CASE WHEN w = ALL (supply) THEN 1 ELSE 0 END);
  INSERT INTO new_order VALUES (o, d, w);
  FOR n IN 1 .. ol_cnt LOOP
    SELECT i_price INTO price FROM item WHERE i_id = items[n];
    IF NOT FOUND THEN
      RETURN 0;
    END IF;
    remote := CASE WHEN supply[n] = w THEN 0 ELSE 1 END;
    UPDATE stock SET s_quantity = CASE WHEN s_quantity >= qty[n] + 10 THEN s_quantity - qty[n]
                                       ELSE s_quantity - qty[n] + 91 END,
      s_ytd = s_ytd + qty[n], s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + remote
      WHERE s_w_id = supply[n] AND s_i_id = items[n]
      RETURNING CASE d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
        WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07
        WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO dist;
    INSERT INTO order_line VALUES (o, d, w, n, items[n], supply[n], NULL, qty[n], qty[n] * price, dist);
    total := total + qty[n] * price;
  END LOOP;
  RETURN 1;
END $$;

-- The customer a Payment or Order-Status names: by id, or by last name number the one at
-- position n/2 rounded up by first name.
CREATE FUNCTION tpcc_customer(w int, d int, c int, by_name int, last int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE ids int[];
BEGIN
  IF by_name = 0 THEN RETURN c; END IF;
  SELECT array_agg(c_id ORDER BY c_first) INTO ids FROM customer
    WHERE c_w_id = w AND c_d_id = d AND c_last = tpcc_last(last);
  RETURN ids[(cardinality(ids) + 1) / 2];
END $$;

-- Payment (clause 2.5.2).
CREATE FUNCTION tpcc_payment(w int, d int, c_w int, c_d int, c int, by_name int, last int, cents int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE amount numeric := cents / 100.0; wname text; dname text; cid int;
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w RETURNING w_name INTO wname;
  UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d RETURNING d_name INTO dname;
  cid := tpcc_customer(c_w, c_d, c, by_name, last);
  UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
    c_payment_cnt = c_payment_cnt + 1,
    c_data = CASE WHEN c_credit = 'BC'
      THEN substr(format('%s %s %s %s %s %s ', cid, c_d, c_w, d, w, amount) || c_data, 1, 500)
      ELSE c_data END
    WHERE c_w_id = c_w AND c_d_id = c_d AND c_id = cid;
  INSERT INTO history VALUES (cid, c_d, c_w, d, w, now(), amount, wname || '    ' || dname);
  RETURN cid;
END $$;

-- Order-Status (clause 2.6.2): reads only. The newest order's lines.
CREATE FUNCTION tpcc_order_status(w int, d int, c int, by_name int, last int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE cid int; bal numeric; o int; lines int;
BEGIN
  cid := tpcc_customer(w, d, c, by_name, last);
  SELECT c_balance INTO bal FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
  SELECT o_id INTO o FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = cid
    ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount,
    ol_delivery_d FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o) l;
  RETURN lines;
END $$;

-- Delivery (clause 2.7.4): each district's oldest undelivered order (one another Delivery
-- holds is passed over, as bufpool's moves to the next).
CREATE FUNCTION tpcc_delivery(w int, carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE o int; cid int; total numeric; delivered int := 0;
BEGIN
  FOR d IN 1 .. 10 LOOP
    DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id =
      (SELECT no_o_id FROM new_order WHERE no_w_id = w AND no_d_id = d
       ORDER BY no_o_id LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING no_o_id INTO o;
    CONTINUE WHEN o IS NULL;
    UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o
      RETURNING o_c_id INTO cid;
    UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    SELECT sum(ol_amount) INTO total FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    UPDATE customer SET c_balance = c_balance + total, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
    delivered := delivered + 1;
    o := NULL;
  END LOOP;
  RETURN delivered;
END $$;

-- Stock-Level (clause 2.8.2): reads only.
CREATE FUNCTION tpcc_stock_level(w int, d int, threshold int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE next int; low int;
BEGIN
  SELECT d_next_o_id INTO next FROM district WHERE d_w_id = w AND d_id = d;
  SELECT count(DISTINCT s_i_id) INTO low FROM order_line, stock
    WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= next - 20 AND ol_o_id < next
      AND s_w_id = w AND s_i_id = ol_i_id AND s_quantity < threshold;
  RETURN low;
END $$;

-- Consistency conditions 1-4 (clause 3.3.2): the rows that break one; none when sound.
CREATE VIEW tpcc_broken AS
  SELECT 'condition 1, warehouse ' || w_id AS problem FROM warehouse
    WHERE w_ytd <> (SELECT sum(d_ytd) FROM district WHERE d_w_id = w_id)
  UNION ALL
  SELECT 'condition 2, district (' || d_w_id || ', ' || d_id || ')' FROM district
    WHERE d_next_o_id - 1 <> (SELECT max(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id)
       OR d_next_o_id - 1 <> coalesce((SELECT max(no_o_id) FROM new_order
                                       WHERE no_w_id = d_w_id AND no_d_id = d_id), d_next_o_id - 1)
  UNION ALL
  SELECT 'condition 3, district (' || no_w_id || ', ' || no_d_id || ')' FROM new_order
    GROUP BY no_w_id, no_d_id HAVING max(no_o_id) - min(no_o_id) + 1 <> count(*)
  UNION ALL
  SELECT 'condition 4, district (' || o_w_id || ', ' || o_d_id || ')' FROM orders
    GROUP BY o_w_id, o_d_id HAVING sum(o_ol_cnt) <> (SELECT count(*) FROM order_line
      WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id);
