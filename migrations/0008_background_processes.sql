CREATE TABLE "background_processes" (
	"id" text PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"conversation_id" text NOT NULL,
	"turn_id" uuid,
	"command" text NOT NULL,
	"origin" jsonb,
	"owner" text NOT NULL,
	"tag" text,
	"state" text DEFAULT 'running' NOT NULL,
	"exit_status" text,
	"tail" text,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone,
	"removed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "background_processes_conversation_idx" ON "background_processes" USING btree ("conversation_id","started_at");--> statement-breakpoint
CREATE INDEX "background_processes_persona_idx" ON "background_processes" USING btree ("persona","state");