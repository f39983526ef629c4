CREATE TABLE "conversation_threads" (
	"connector" text NOT NULL,
	"chat" text NOT NULL,
	"thread" text NOT NULL,
	"conversation_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "conversation_threads_connector_chat_thread_pk" PRIMARY KEY("connector","chat","thread")
);
--> statement-breakpoint
ALTER TABLE "outbound_messages" ADD COLUMN "kind" text DEFAULT 'message' NOT NULL;--> statement-breakpoint
ALTER TABLE "outbound_messages" ADD COLUMN "private_to" text;--> statement-breakpoint
CREATE INDEX "conversation_threads_created_idx" ON "conversation_threads" USING btree ("created_at");