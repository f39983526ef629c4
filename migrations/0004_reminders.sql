CREATE TABLE "reminders" (
	"id" uuid PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"conversation_id" text NOT NULL,
	"prompt" text NOT NULL,
	"origin" jsonb,
	"deliver" jsonb,
	"due_at" timestamp with time zone NOT NULL,
	"every_seconds" integer,
	"until" timestamp with time zone,
	"status" text DEFAULT 'pending' NOT NULL,
	"fires" integer DEFAULT 0 NOT NULL,
	"last_fired_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "schedule_pauses" (
	"persona" text NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "schedule_pauses_persona_name_pk" PRIMARY KEY("persona","name")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "reminders_pending_name_idx" ON "reminders" USING btree ("persona","name") WHERE "reminders"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "reminders_due_idx" ON "reminders" USING btree ("due_at") WHERE "reminders"."status" = 'pending';