// The conformance scenarios on Discord: the real connector on discord.js against the fake Discord's gateway and REST.
import { createDiscordDriver } from './discord.driver.ts';
import { registerScenarios } from './scenarios.ts';

registerScenarios(createDiscordDriver());
