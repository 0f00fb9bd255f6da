export * from './host-port';
export { runLocalAgent, type LocalAgentOptions } from './run-local-agent';
export {
  parseAgentConfig,
  modelCandidates,
  knowledgeBaseIds,
  rerankConfig,
  DEFAULTS as LOCAL_AGENT_DEFAULTS,
  type AgentConfig,
} from './config';
export { LOCAL_AGENT_MANIFEST, LOCAL_AGENT_CONFIG_SCHEMA } from './manifest';
export { loadSkill, loadSkills, parseSkillMarkdown, SkillLoadError, type SkillPackage } from './skills/skill-loader';
export { estimateMessageTokens, estimateMessagesTokens, estimateTextTokens } from './context/tokens';
export { isContextOverflow, isContextOverflowText } from './model/overflow';
