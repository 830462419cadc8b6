-- Word postings by term: one row per (term, paper, searchable) holding that paper's chunks with the term, the
-- term's count in each and each chunk's length, so a BM25 query reads only its words' rows (an index range
-- scan) and never a candidate chunk's row. chunk_terms (0002) made a search visit the jsonb row of every
-- chunk holding any of its words (a heap page each: up to 26k for a common word in 100k chunks, 4.7 µs per
-- chunk), and kept a GIN index whose upkeep was ≈ 2.7 ms per chunk written, on the cores the searches need.
-- chunk_terms is no longer written (left in place: a server still running the version before this one reads
-- it, and finds papers added since by their vectors only until it is restarted).
-- New tables and triggers only: nothing existing is rewritten or locked against readers (CREATE TRIGGER takes
-- SHARE ROW EXCLUSIVE on paper_chunks, which SELECTs do not wait for; store/pg.py retries it on a short
-- lock_timeout so writers are held up briefly at most).
CREATE TABLE IF NOT EXISTS term_postings (
    term text NOT NULL,
    paper_id text NOT NULL,
    searchable boolean NOT NULL,
    chunk_ids bigint[] NOT NULL,
    tfs integer[] NOT NULL,
    dls integer[] NOT NULL
);
-- two plain indexes, no unique key: one transaction writes a paper's rows (under an advisory lock on the
-- paper), and entries of one word (or one paper) share a deduplicated leaf entry. A primary key on
-- (term, paper_id, searchable) made each row an insertion at a random leaf of a larger index: with ten users
-- adding papers (Debian PostgreSQL) the insert took 109-193 ms per paper inside PostgreSQL, 85 ms without it.
CREATE INDEX IF NOT EXISTS term_postings_term ON term_postings (term);
CREATE INDEX IF NOT EXISTS term_postings_paper ON term_postings (paper_id);

-- papers whose chunks have no term postings yet: every paper with chunks now, and from here on every paper a
-- process writes chunks for without writing their postings in the same transaction (an older version, or a
-- Python without FTS5); the library processes index them in the background (store/pg_library.py)
CREATE TABLE IF NOT EXISTS postings_pending (
    paper_id text PRIMARY KEY
);

CREATE OR REPLACE FUNCTION astro_chunks_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO postings_pending (paper_id) SELECT DISTINCT paper_id FROM added ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

-- a paper's chunks removed (re-parsed, or the paper removed, by any version): its postings go with them
CREATE OR REPLACE FUNCTION astro_chunks_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM term_postings WHERE paper_id IN (SELECT DISTINCT paper_id FROM removed);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER paper_chunks_added AFTER INSERT ON paper_chunks REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION astro_chunks_added();
CREATE OR REPLACE TRIGGER paper_chunks_removed AFTER DELETE ON paper_chunks REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION astro_chunks_removed();

INSERT INTO postings_pending (paper_id) SELECT DISTINCT paper_id FROM paper_chunks ON CONFLICT DO NOTHING;
