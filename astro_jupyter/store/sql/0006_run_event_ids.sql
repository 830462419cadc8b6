-- SSE event ids never go backwards across a crash: before a run shows event N to any
-- watcher, ``reserved`` >= N is committed here (in blocks), so the terminal events written
-- for a run a dead process left behind are numbered after every id a client can have seen.
CREATE TABLE IF NOT EXISTS agent_run_seq (
    run_id TEXT PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    reserved INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
