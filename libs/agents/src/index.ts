export { AgentsModule } from './agents.module';
export { AgentsService, agentView, AGENT_ID_PATTERN, type AgentInput, type AgentView } from './agents.service';
export * from './policies';
