"""A worker's queued turn on PostgreSQL in one round trip (schema version 11, ADR 0043).

``store.queues.take`` asks three statements a turn (the open queues and their leases,
each queue's resumed runs and front, the gated claims); on PostgreSQL each is a round
trip, where an unqueued claim is one. ``lashflow_take_queued`` runs the same turn in the
server: the same listing rule as ``queues.candidates`` (pages of the front read in
index order, keys at their limit and runs whose rate does not allow a start passed
over), then ``lashflow_gate_claim`` for each new run in the turn's order. The gate stays
the judge; the listing takes no lock. Its answer is one row per claimed run (kind 0),
per run being resumed (kind 1, its id) and, when a rate held a start back, one row with
the time it next allows one (kind 2).
"""

from __future__ import annotations

import asyncpg

from .base import Claimed, QueueTake
from .queues import PAGE_MIN, PAGES
from .rows import RUN_COLUMNS, run_from_row

TAKE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION lashflow_take_queued(
    p_now DOUBLE PRECISION, p_limit INTEGER, p_owner TEXT, p_expires DOUBLE PRECISION,
    p_skip TEXT[]) RETURNS TABLE (o_kind SMALLINT, o_id TEXT, o_at DOUBLE PRECISION,
                                  o_run lashflow_runs)
LANGUAGE plpgsql VOLATILE AS $take$
DECLARE
    q lashflow_queues%ROWTYPE; r RECORD; c RECORD; cur REFCURSOR; part INTEGER;
    held JSONB; taken JSONB; total BIGINT; want INTEGER; picked INTEGER;
    queue_tat DOUBLE PRECISION; key_tat DOUBLE PRECISION; limited DOUBLE PRECISION;
    c_run TEXT[] := '{{}}'; c_gen BIGINT[] := '{{}}'; c_pri INTEGER[] := '{{}}';
    c_tag DOUBLE PRECISION[] := '{{}}'; c_created DOUBLE PRECISION[] := '{{}}';
BEGIN
    FOR q IN SELECT * FROM lashflow_queues WHERE paused = 0 ORDER BY name LOOP
        held := '{{}}'; total := 0;
        IF q.concurrency IS NOT NULL OR q.per_key IS NOT NULL THEN
            SELECT COALESCE(jsonb_object_agg(h.k, h.n), '{{}}'), COALESCE(SUM(h.n), 0)
                INTO held, total
                FROM (SELECT COALESCE(queue_key, '') AS k, COUNT(*) AS n FROM lashflow_runs
                      WHERE queue = q.name AND lease_owner IS NOT NULL
                        AND lease_expires >= p_now
                        AND status NOT IN ('finished', 'failed', 'cancelled')
                      GROUP BY 1) h;
        END IF;
        want := p_limit;
        IF q.concurrency IS NOT NULL THEN want := LEAST(want, q.concurrency - total); END IF;
        CONTINUE WHEN want <= 0;
        queue_tat := NULL;
        IF q.rate_n IS NOT NULL THEN
            SELECT tat INTO queue_tat FROM lashflow_buckets WHERE queue = q.name AND key = '';
        END IF;
        taken := '{{}}'; picked := 0;
        FOR part IN 0..1 LOOP
            -- first the runs being resumed, then the front in index order, both read
            -- row by row: the turn stops reading once its slots are filled
            IF part = 0 THEN
                OPEN cur FOR
                    SELECT run_id, COALESCE(queue_key, '') AS k, priority, fair_tag,
                           created_at, FALSE AS starting, CAST(NULL AS BIGINT) AS gen
                    FROM lashflow_runs WHERE queue = q.name
                      AND status IN ('running', 'waiting')
                      AND (lease_owner IS NULL OR lease_expires < p_now)
                      AND (status = 'running' OR (wake_at IS NOT NULL AND wake_at <= p_now))
                    UNION ALL
                    SELECT run_id, COALESCE(queue_key, ''), priority, fair_tag, created_at,
                           FALSE, NULL
                    FROM lashflow_runs WHERE queue = q.name AND lease_owner IS NOT NULL
                      AND status = 'queued' AND lease_expires < p_now
                      AND (wake_at IS NULL OR wake_at <= p_now)
                    ORDER BY 3, 4, 5, 1;
            ELSE
                OPEN cur FOR
                    SELECT run_id, COALESCE(queue_key, '') AS k, priority, fair_tag,
                           created_at, generation = 0 AS starting, generation AS gen
                    FROM lashflow_runs WHERE queue = q.name AND status = 'queued'
                      AND lease_owner IS NULL AND (wake_at IS NULL OR wake_at <= p_now)
                    ORDER BY priority, fair_tag, created_at, run_id
                    LIMIT {PAGES} * GREATEST({PAGE_MIN}, 2 * want);
            END IF;
            LOOP
                EXIT WHEN picked >= want;
                FETCH cur INTO r;
                EXIT WHEN NOT FOUND;
                CONTINUE WHEN r.run_id = ANY(p_skip);
                CONTINUE WHEN q.per_key IS NOT NULL AND COALESCE((held ->> r.k)::BIGINT, 0)
                    + COALESCE((taken ->> r.k)::BIGINT, 0) >= q.per_key;
                IF r.starting THEN
                    IF queue_tat IS NOT NULL AND queue_tat > p_now THEN
                        limited := LEAST(limited, queue_tat);
                        CONTINUE;
                    END IF;
                    IF q.key_rate_n IS NOT NULL THEN
                        SELECT tat INTO key_tat FROM lashflow_buckets
                            WHERE queue = q.name AND key = r.k;
                        IF FOUND AND key_tat > p_now THEN
                            limited := LEAST(limited, key_tat);
                            CONTINUE;
                        END IF;
                    END IF;
                END IF;
                IF q.per_key IS NOT NULL THEN
                    taken := taken || jsonb_build_object(
                        r.k, COALESCE((taken ->> r.k)::BIGINT, 0) + 1);
                END IF;
                picked := picked + 1;
                c_run := c_run || r.run_id; c_gen := c_gen || r.gen;
                c_pri := c_pri || r.priority; c_tag := c_tag || r.fair_tag;
                c_created := c_created || r.created_at;
            END LOOP;
            CLOSE cur;
        END LOOP;
    END LOOP;
    FOR c IN SELECT * FROM unnest(c_run, c_gen, c_pri, c_tag, c_created)
                 AS u(run_id, gen, pri, tag, created)
             ORDER BY pri, tag, created, run_id LIMIT p_limit LOOP
        IF c.gen IS NULL THEN
            o_kind := 1; o_id := c.run_id; o_at := NULL; o_run := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT * INTO o_run FROM lashflow_gate_claim(c.run_id, p_owner, p_now, p_expires,
                                                     c.gen, NULL, FALSE);
        IF FOUND THEN
            o_kind := 0; o_id := c.run_id; o_at := NULL;
            RETURN NEXT;
        END IF;
    END LOOP;
    IF limited IS NOT NULL THEN
        o_kind := 2; o_id := NULL; o_at := limited; o_run := NULL;
        RETURN NEXT;
    END IF;
END
$take$"""

MIGRATION_11 = [TAKE_FUNCTION]

_TAKE = (f"SELECT t.o_kind, t.o_id, t.o_at, "
         f"{', '.join('(t.o_run).' + c.strip() for c in RUN_COLUMNS.split(','))} "
         "FROM lashflow_take_queued($1, $2, $3, $4, $5) AS t")


class TakeStatements:
    async def take_turn(self, conn: asyncpg.Connection, now: float, limit: int,
                             owner: str, ttl: float, skip: list[str]) -> QueueTake:
        """The whole turn (``lashflow_take_queued``): one statement, one round trip."""
        take = QueueTake([], [], None)
        for row in await conn.fetch(_TAKE, now, limit, owner, now + ttl, skip):
            if row[0] == 0:
                take.claimed.append(Claimed(run_from_row(tuple(row)[3:]), None))
            elif row[0] == 1:
                take.listed.append(row[1])
            else:
                take.allowed_at = row[2]
        return take

