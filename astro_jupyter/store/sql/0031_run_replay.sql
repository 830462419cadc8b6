-- The folded replay of each ended run (its stored events, consecutive text/thinking deltas joined),
-- written once when the run's done is stored, so reopening a long session reads one row per run
-- instead of tens of thousands of delta rows. `last_seq`: the run's last stored seq it covers; a
-- run with events stored after it (or none) is read from agent_events as before.
CREATE TABLE IF NOT EXISTS agent_run_replay (
    run_id TEXT PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    last_seq INTEGER NOT NULL,
    events TEXT NOT NULL
) WITHOUT ROWID;
