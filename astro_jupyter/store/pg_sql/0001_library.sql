-- The shared paper library: papers (with who added them and who is parsing them), their chunks with a
-- tsvector for full-text search, the registry of embedding spaces (one vector table each, made by
-- store/pg_library.py), the log of removed vectors (so every user's in-memory index can follow), and
-- the users who may remove any paper.
CREATE SEQUENCE IF NOT EXISTS library_changes;

CREATE TABLE IF NOT EXISTS papers (
    id text PRIMARY KEY,
    arxiv_id text,
    arxiv_version text,
    doi text,
    bibcode text,
    title text NOT NULL DEFAULT '',
    authors text NOT NULL DEFAULT '[]',
    year integer,
    journal text NOT NULL DEFAULT '',
    abstract text NOT NULL DEFAULT '',
    keywords text NOT NULL DEFAULT '[]',
    citation_count integer,
    url text NOT NULL DEFAULT '',
    pdf_path text,
    markdown_path text,
    state text NOT NULL DEFAULT 'metadata',
    source text NOT NULL DEFAULT '',
    metadata text NOT NULL DEFAULT '{}',
    added_by text NOT NULL DEFAULT '',
    parsing_by text,
    parsing_since timestamptz,
    created_at text NOT NULL DEFAULT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    updated_at text NOT NULL DEFAULT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
);
CREATE UNIQUE INDEX IF NOT EXISTS papers_arxiv ON papers (arxiv_id) WHERE arxiv_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS papers_doi ON papers (lower(doi)) WHERE doi IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS papers_bibcode ON papers (bibcode) WHERE bibcode IS NOT NULL;
CREATE INDEX IF NOT EXISTS papers_state ON papers (state, created_at);
-- one copy of a PDF added from disk, however many users add it at the same moment
CREATE UNIQUE INDEX IF NOT EXISTS papers_sha256 ON papers (((metadata::jsonb) ->> 'sha256'));

-- The original Porter stemmer, stopwords kept: what FTS5's porter tokenizer does, and BM25 over the same words
-- is what makes the shared library rank like the SQLite one.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'astro_english_stem') THEN
        CREATE TEXT SEARCH DICTIONARY astro_english_stem (TEMPLATE = snowball, Language = porter);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = 'astro_english') THEN
        CREATE TEXT SEARCH CONFIGURATION astro_english (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION astro_english
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH astro_english_stem;
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS paper_chunks (
    id bigserial PRIMARY KEY,
    paper_id text NOT NULL REFERENCES papers (id) ON DELETE CASCADE,
    seq integer NOT NULL,
    section text NOT NULL DEFAULT '',
    part text NOT NULL DEFAULT 'body',
    page_start integer,
    page_end integer,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('astro_english', text || ' ' || section)) STORED,
    -- words in the chunk, stopwords included (BM25's document length, as FTS5 counts it)
    ntokens integer GENERATED ALWAYS AS (
        cardinality(regexp_split_to_array(btrim(text || ' ' || section, E' \t\n.,;:()[]{}-'), '[^[:alnum:]]+'))) STORED,
    UNIQUE (paper_id, seq)
);
CREATE INDEX IF NOT EXISTS paper_chunks_tsv ON paper_chunks USING gin (tsv);

CREATE TABLE IF NOT EXISTS embedding_spaces (
    name text PRIMARY KEY,
    backend text NOT NULL,
    dim integer NOT NULL,
    kind text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS vector_tombstones (
    space text NOT NULL,
    chunk_id bigint NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX IF NOT EXISTS vector_tombstones_space ON vector_tombstones (space, xid);

CREATE OR REPLACE FUNCTION astro_vector_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO vector_tombstones (space, chunk_id) VALUES (TG_TABLE_NAME, OLD.chunk_id);
    RETURN OLD;
END
$$;

CREATE TABLE IF NOT EXISTS library_admins (
    username text PRIMARY KEY
);
