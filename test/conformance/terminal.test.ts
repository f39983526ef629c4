// The conformance scenarios at the terminal (`parlor chat`): the real connector on in-memory streams.
import { registerScenarios } from './scenarios.ts';
import { createTerminalDriver } from './terminal.driver.ts';

registerScenarios(createTerminalDriver());
