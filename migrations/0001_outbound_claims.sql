ALTER TABLE "outbound_messages" ADD COLUMN "claimed_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "outbound_turn_idx" ON "outbound_messages" USING btree ("turn_id");--> statement-breakpoint
CREATE INDEX "outbound_open_idx" ON "outbound_messages" USING btree ("conversation_id") WHERE "outbound_messages"."status" in ('pending', 'sending');--> statement-breakpoint
CREATE INDEX "outbound_created_idx" ON "outbound_messages" USING btree ("created_at");