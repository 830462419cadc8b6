-- no transaction
-- Full text by word -> chunk postings, tokenized as SQLite's FTS5 tokenizes (store/fts_terms.py), so BM25
-- reads only the postings of the question's words (the tsvector query unnested every matching chunk's
-- whole tsvector) and scores as the SQLite library does. Each statement runs alone with a short lock
-- timeout (store/pg.py): new tables, a nullable column (no rewrite), indexes built CONCURRENTLY; the
-- existing chunks are indexed afterwards in the background by the library processes
-- (fts_length IS NULL marks a chunk not indexed yet; until none is left, the tsvector ranking answers).
CREATE TABLE IF NOT EXISTS chunk_terms (
    term text NOT NULL,
    chunk_id bigint NOT NULL REFERENCES paper_chunks (id) ON DELETE CASCADE,
    tf integer NOT NULL,
    dl integer NOT NULL,
    searchable boolean NOT NULL
);
CREATE INDEX IF NOT EXISTS chunk_terms_term ON chunk_terms (term) INCLUDE (chunk_id, tf, dl, searchable);
CREATE INDEX IF NOT EXISTS chunk_terms_chunk ON chunk_terms (chunk_id);
-- chunks and tokens per paper (BM25's row count and average length without a scan of every chunk)
CREATE TABLE IF NOT EXISTS paper_term_stats (
    paper_id text PRIMARY KEY REFERENCES papers (id) ON DELETE CASCADE,
    chunks integer NOT NULL,
    tokens bigint NOT NULL
);
ALTER TABLE paper_chunks ADD COLUMN IF NOT EXISTS fts_length integer;
CREATE INDEX CONCURRENTLY IF NOT EXISTS paper_chunks_unindexed ON paper_chunks (paper_id) WHERE fts_length IS NULL;
