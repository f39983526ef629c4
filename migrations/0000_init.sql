CREATE TABLE "conversations" (
	"id" text PRIMARY KEY NOT NULL,
	"persona" text NOT NULL,
	"connector" text,
	"chat" text,
	"thread" text,
	"history_after_id" integer DEFAULT 0 NOT NULL,
	"thinking" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_activity_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inbound_events" (
	"connector" text NOT NULL,
	"external_id" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbound_events_connector_external_id_pk" PRIMARY KEY("connector","external_id")
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"turn_id" uuid,
	"role" text NOT NULL,
	"content" jsonb NOT NULL,
	"sender" text,
	"external_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "outbound_messages" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"dedupe_key" text NOT NULL,
	"turn_id" uuid,
	"conversation_id" text,
	"connector" text NOT NULL,
	"chat" text NOT NULL,
	"thread" text,
	"reply_to" text,
	"text" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"platform_message_ids" jsonb,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "sender_notices" (
	"connector" text NOT NULL,
	"sender_id" text NOT NULL,
	"notified_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sender_notices_connector_sender_id_pk" PRIMARY KEY("connector","sender_id")
);
--> statement-breakpoint
CREATE TABLE "turns" (
	"id" uuid PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"job_id" text,
	"origin" jsonb,
	"cancel_requested" boolean DEFAULT false NOT NULL,
	"model_calls" integer DEFAULT 0 NOT NULL,
	"input_tokens" integer DEFAULT 0 NOT NULL,
	"output_tokens" integer DEFAULT 0 NOT NULL,
	"summary" text,
	"error" text,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "turns" ADD CONSTRAINT "turns_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "inbound_events_received_idx" ON "inbound_events" USING btree ("received_at");--> statement-breakpoint
CREATE INDEX "messages_conversation_idx" ON "messages" USING btree ("conversation_id","id");--> statement-breakpoint
CREATE INDEX "messages_pending_idx" ON "messages" USING btree ("conversation_id","id") WHERE "messages"."turn_id" is null;--> statement-breakpoint
CREATE INDEX "messages_turn_idx" ON "messages" USING btree ("turn_id");--> statement-breakpoint
CREATE UNIQUE INDEX "outbound_dedupe_idx" ON "outbound_messages" USING btree ("dedupe_key");--> statement-breakpoint
CREATE INDEX "outbound_pending_idx" ON "outbound_messages" USING btree ("connector","id") WHERE "outbound_messages"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "turns_conversation_idx" ON "turns" USING btree ("conversation_id","started_at");--> statement-breakpoint
CREATE UNIQUE INDEX "turns_job_idx" ON "turns" USING btree ("job_id");