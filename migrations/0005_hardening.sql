CREATE TABLE "inbound_failures" (
	"connector" text NOT NULL,
	"external_id" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"raw" text,
	"dead_lettered" boolean DEFAULT false NOT NULL,
	"first_failed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_failed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbound_failures_connector_external_id_pk" PRIMARY KEY("connector","external_id")
);
--> statement-breakpoint
ALTER TABLE "outbound_messages" ADD COLUMN "claimed_by" text;--> statement-breakpoint
CREATE INDEX "outbound_sending_idx" ON "outbound_messages" USING btree ("claimed_by") WHERE "outbound_messages"."status" = 'sending';