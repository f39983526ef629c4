CREATE TABLE "persona_asks" (
	"id" uuid PRIMARY KEY NOT NULL,
	"source" text NOT NULL,
	"target" text NOT NULL,
	"status" text DEFAULT 'waiting' NOT NULL,
	"reply" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"answered_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "subagent_tasks" (
	"handle" text PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"label" text,
	"task" text NOT NULL,
	"tools" jsonb,
	"depth" integer DEFAULT 1 NOT NULL,
	"parent_conversation_id" text NOT NULL,
	"parent_turn_id" uuid NOT NULL,
	"origin" jsonb,
	"status" text DEFAULT 'queued' NOT NULL,
	"result" text,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"pushed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "subagent_tasks_batch_idx" ON "subagent_tasks" USING btree ("parent_turn_id");--> statement-breakpoint
CREATE INDEX "subagent_tasks_parent_idx" ON "subagent_tasks" USING btree ("parent_conversation_id","created_at");--> statement-breakpoint
CREATE INDEX "subagent_tasks_persona_idx" ON "subagent_tasks" USING btree ("persona","status");