-- Chunk parts (body / references / front matter) and the registry of embedding spaces.
-- One vector table per embedding space (backend + dimension) is created by store/chunks.py on
-- demand, so switching the embedding backend never mixes vectors of different models.
ALTER TABLE paper_chunks ADD COLUMN part TEXT NOT NULL DEFAULT 'body';
CREATE INDEX IF NOT EXISTS paper_chunks_paper ON paper_chunks (paper_id, seq);

CREATE TABLE IF NOT EXISTS embedding_spaces (
    name TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    dim INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
