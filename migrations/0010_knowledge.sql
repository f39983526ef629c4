CREATE TABLE "conversation_summaries" (
	"conversation_id" text PRIMARY KEY NOT NULL,
	"summary" text NOT NULL,
	"through_message_id" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "knowledge_chunks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"source" text NOT NULL,
	"chunk" integer NOT NULL,
	"content" text NOT NULL,
	"embedding" real[],
	"embedding_model" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"search" "tsvector" GENERATED ALWAYS AS (to_tsvector('english', coalesce("content", ''))) STORED NOT NULL
);
--> statement-breakpoint
CREATE TABLE "knowledge_sources" (
	"persona" text NOT NULL,
	"source" text NOT NULL,
	"path" text,
	"state" text DEFAULT 'ingesting' NOT NULL,
	"error" text,
	"chunks" integer DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "knowledge_sources_persona_source_pk" PRIMARY KEY("persona","source")
);
--> statement-breakpoint
ALTER TABLE "memories" ADD COLUMN "embedding" real[];--> statement-breakpoint
ALTER TABLE "memories" ADD COLUMN "embedding_model" text;--> statement-breakpoint
CREATE UNIQUE INDEX "knowledge_chunks_source_idx" ON "knowledge_chunks" USING btree ("persona","source","chunk");--> statement-breakpoint
CREATE INDEX "knowledge_chunks_search_idx" ON "knowledge_chunks" USING gin ("search");