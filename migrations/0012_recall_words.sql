-- Recall's vocabulary: every word of a persona's memories and knowledge chunks, kept by triggers. A misspelt query
-- word is looked up here by trigram similarity (a few thousand words), and the words it stands for are then searched
-- by full text, instead of comparing the query with the text of every row (the trigram indexes on the texts go).
CREATE TABLE "recall_words" (
	"persona" text NOT NULL,
	"word" text NOT NULL,
	CONSTRAINT "recall_words_persona_word_pk" PRIMARY KEY("persona","word")
);
--> statement-breakpoint
DROP INDEX IF EXISTS "knowledge_chunks_content_trgm_idx";--> statement-breakpoint
DROP INDEX IF EXISTS "memories_content_trgm_idx";--> statement-breakpoint
CREATE INDEX "memories_importance_idx" ON "memories" USING btree ("persona","importance","created_at");--> statement-breakpoint
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
		CREATE INDEX IF NOT EXISTS "recall_words_trgm_idx" ON "recall_words" USING gin ("word" gin_trgm_ops);
	END IF;
END $$;
--> statement-breakpoint
-- The words of a text as full-text search splits it (without stemming), 3 to 40 characters.
CREATE FUNCTION parlor_recall_words(body text) RETURNS SETOF text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT w FROM unnest(tsvector_to_array(to_tsvector('simple', coalesce(body, '')))) AS w
	WHERE length(w) BETWEEN 3 AND 40 AND left(w, 1) <> '-'
$$;
--> statement-breakpoint
-- New words are inserted in word order, so two writers adding the same words cannot deadlock.
CREATE FUNCTION parlor_memories_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO recall_words (persona, word)
	SELECT DISTINCT r.persona, w FROM changed r, parlor_recall_words(r.category || ' ' || r.content) AS w
	ORDER BY 1, 2
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION parlor_knowledge_chunks_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO recall_words (persona, word)
	SELECT DISTINCT r.persona, w FROM changed r, parlor_recall_words(r.content) AS w
	ORDER BY 1, 2
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER memories_words_insert AFTER INSERT ON memories REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION parlor_memories_words();
--> statement-breakpoint
-- An edit is one row, and only a change of its text matters (storing an embedding is an update too).
CREATE FUNCTION parlor_memory_edit_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO recall_words (persona, word)
	SELECT DISTINCT NEW.persona, w FROM parlor_recall_words(NEW.category || ' ' || NEW.content) AS w
	ORDER BY 2
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER memories_words_update AFTER UPDATE OF category, content ON memories
	FOR EACH ROW WHEN (OLD.category IS DISTINCT FROM NEW.category OR OLD.content IS DISTINCT FROM NEW.content)
	EXECUTE FUNCTION parlor_memory_edit_words();
--> statement-breakpoint
CREATE TRIGGER knowledge_chunks_words_insert AFTER INSERT ON knowledge_chunks REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION parlor_knowledge_chunks_words();
--> statement-breakpoint
INSERT INTO recall_words (persona, word)
SELECT DISTINCT persona, w FROM memories, parlor_recall_words(category || ' ' || content) AS w
ON CONFLICT DO NOTHING;
--> statement-breakpoint
INSERT INTO recall_words (persona, word)
SELECT DISTINCT persona, w FROM knowledge_chunks, parlor_recall_words(content) AS w
ON CONFLICT DO NOTHING;
