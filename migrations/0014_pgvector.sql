-- pgvector where the server has it and lets us create it (as pg_trgm): recall then finds the rows nearest in meaning
-- by its HNSW index. Without it embeddings stay in their real[] columns and recall compares them in the process.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
		BEGIN
			CREATE EXTENSION IF NOT EXISTS vector;
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'pgvector could not be created (%): recall compares embeddings in the process', SQLERRM;
		END;
	END IF;
END $$;
