CREATE TABLE "process_beats" (
	"session" text PRIMARY KEY NOT NULL,
	"beat_at" timestamp with time zone DEFAULT now() NOT NULL,
	"fenced_at" timestamp with time zone
);
