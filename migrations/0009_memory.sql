-- pg_trgm (trigram similarity, for names and typos in recall) where the server has it and lets us create it; a
-- managed Postgres may not, and recall then ranks by full-text search alone.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
		BEGIN
			CREATE EXTENSION IF NOT EXISTS pg_trgm;
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'pg_trgm could not be created (%): recall works without trigram matching', SQLERRM;
		END;
	END IF;
END $$;
--> statement-breakpoint
CREATE TABLE "memories" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"category" text DEFAULT 'note' NOT NULL,
	"content" text NOT NULL,
	"importance" integer DEFAULT 5 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"search" "tsvector" GENERATED ALWAYS AS (setweight(to_tsvector('english', coalesce("category", '')), 'A') || setweight(to_tsvector('english', coalesce("content", '')), 'B')) STORED NOT NULL,
	CONSTRAINT "memories_importance_check" CHECK ("memories"."importance" between 1 and 10)
);
--> statement-breakpoint
CREATE TABLE "user_models" (
	"persona" text NOT NULL,
	"user_address" text NOT NULL,
	"dimension" text NOT NULL,
	"content" text NOT NULL,
	"confidence" real DEFAULT 0.7 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "user_models_persona_user_address_dimension_pk" PRIMARY KEY("persona","user_address","dimension")
);
--> statement-breakpoint
CREATE INDEX "memories_persona_idx" ON "memories" USING btree ("persona","created_at");--> statement-breakpoint
CREATE INDEX "memories_search_idx" ON "memories" USING gin ("search");--> statement-breakpoint
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
		CREATE INDEX IF NOT EXISTS "memories_content_trgm_idx" ON "memories" USING gin ("content" gin_trgm_ops);
	END IF;
END $$;