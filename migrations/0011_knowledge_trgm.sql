-- The trigram index recall's `<%` needs on knowledge chunks (as on memories), where pg_trgm is there; without the
-- extension recall ranks chunks by full-text search alone and never asks for it.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
		CREATE INDEX IF NOT EXISTS "knowledge_chunks_content_trgm_idx" ON "knowledge_chunks" USING gin ("content" gin_trgm_ops);
	END IF;
END $$;
