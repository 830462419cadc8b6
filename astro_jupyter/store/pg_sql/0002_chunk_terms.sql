-- no transaction
-- Full text with SQLite FTS5's own tokens (store/fts_terms.py), so BM25 scores as the SQLite library does
-- and reads only the chunks holding a question's words: per chunk a jsonb object term -> count, with a GIN
-- index on its keys (the word -> chunk postings); a term's count is a binary search in the object. The
-- tsvector query unnested every matching chunk's whole tsvector. Each statement runs alone with a short lock timeout (store/pg.py): new
-- tables, a nullable column (no rewrite), an index built CONCURRENTLY; the existing chunks are indexed
-- afterwards in the background by the library processes (fts_length IS NULL marks a chunk not indexed
-- yet; until none is left, the tsvector ranking answers).
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id bigint PRIMARY KEY REFERENCES paper_chunks (id) ON DELETE CASCADE,
    counts jsonb NOT NULL,
    dl integer NOT NULL,
    searchable boolean NOT NULL
);
-- fastupdate off: a search reads the index alone, not also the list of recent inserts that every search
-- scans in full until a vacuum merges it (users keep adding papers while others search)
CREATE INDEX IF NOT EXISTS chunk_terms_counts ON chunk_terms USING gin (counts) WITH (fastupdate = off);
-- chunks and tokens per paper (BM25's row count and average length without a scan of every chunk)
CREATE TABLE IF NOT EXISTS paper_term_stats (
    paper_id text PRIMARY KEY REFERENCES papers (id) ON DELETE CASCADE,
    chunks integer NOT NULL,
    tokens bigint NOT NULL
);
ALTER TABLE paper_chunks ADD COLUMN IF NOT EXISTS fts_length integer;
CREATE INDEX CONCURRENTLY IF NOT EXISTS paper_chunks_unindexed ON paper_chunks (paper_id) WHERE fts_length IS NULL;
-- the searchable chunks' ids, for the check for chunks without a vector (an index-only scan, not the rows)
CREATE INDEX CONCURRENTLY IF NOT EXISTS paper_chunks_searchable ON paper_chunks (id) WHERE part <> 'references';
