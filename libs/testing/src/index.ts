export { ScriptedOpenAIServer, type RecordedRequest } from './scripted-openai-server';
export {
  scripts,
  type MalformedMode,
  type Script,
  type ScriptedCompletion,
  type ScriptedToolCall,
  type ScriptedUsage,
} from './openai-scripts';
export {
  MemoryModels,
  UNIT_KEY,
  chatModel,
  collect,
  failure,
  invokeRequest,
  modelsFixture,
  runCall,
  type ModelsFixture,
} from './models-fixture';
export {
  JSON_NUMBERS,
  randomJson,
  randomObject,
  runContextFixture,
  seededRandom,
  type JsonKind,
  type JsonShape,
} from './wire-cases';
export { medianSurvivedPerScavenge } from './gc-trace';
