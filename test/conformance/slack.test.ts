// The conformance scenarios on Slack: the real connector on Bolt against the fake Slack, in Socket Mode and in HTTP
// mode (signed requests to Parlor's HTTP server).
import { registerScenarios } from './scenarios.ts';
import { createSlackDriver } from './slack.driver.ts';

registerScenarios(createSlackDriver('socket'));
registerScenarios(createSlackDriver('http'));
