// The conformance scenarios on Telegram: the real connector long polling a scripted Bot API.
import { registerScenarios } from './scenarios.ts';
import { createTelegramDriver } from './telegram.driver.ts';

registerScenarios(createTelegramDriver());
