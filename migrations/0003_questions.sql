CREATE TABLE "questions" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"persona" text NOT NULL,
	"conversation_id" text NOT NULL,
	"turn_id" uuid,
	"method" text NOT NULL,
	"data" jsonb,
	"text" text NOT NULL,
	"choices" jsonb NOT NULL,
	"connector" text,
	"chat" text,
	"thread" text,
	"asked_user" text,
	"approvers_only" boolean DEFAULT false NOT NULL,
	"owner" text,
	"status" text DEFAULT 'pending' NOT NULL,
	"answer" jsonb,
	"answered_by" text,
	"answered_via" text,
	"answered_at" timestamp with time zone,
	"expired_reason" text,
	"expires_at" timestamp with time zone NOT NULL,
	"closed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tool_grants" (
	"persona" text NOT NULL,
	"tool" text NOT NULL,
	"scope" text NOT NULL,
	"granted_by" text NOT NULL,
	"question_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tool_grants_persona_tool_scope_pk" PRIMARY KEY("persona","tool","scope")
);
--> statement-breakpoint
ALTER TABLE "outbound_messages" ADD COLUMN "buttons" jsonb;--> statement-breakpoint
CREATE INDEX "questions_pending_idx" ON "questions" USING btree ("expires_at") WHERE "questions"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "questions_chat_idx" ON "questions" USING btree ("connector","chat") WHERE "questions"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "questions_unclosed_idx" ON "questions" USING btree ("connector") WHERE "questions"."status" <> 'pending' and "questions"."closed_at" is null;