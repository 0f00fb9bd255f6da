import type { ChatMessage, JsonObject, SkillGrant } from '../host-port';
import { toolDefinition, type LocalTool } from '../tools/definitions';
import { readSkillFile } from './skill-files';
import type { SkillPackage } from './skill-loader';

/*
 * The skills' face to the model: an index in the system prompt (docs/local-agent.md#skills: names and
 * descriptions only, XML-escaped, host order) and two local tools — `activate` returns a skill's
 * instructions, `read_skill_file` reads its other files (path-confined).
 */

export const ACTIVATE_TOOL = 'activate';
export const READ_SKILL_FILE_TOOL = 'read_skill_file';

const escapeXml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');

const HEADER =
  'Skills provide specialized instructions for particular tasks. When the user request clearly matches a ' +
  "skill's description, call the `activate` tool with the skill's name. Only names and descriptions are shown " +
  'here; the full instructions arrive as the tool result (an activated skill may point to more files: read them ' +
  'with `read_skill_file`). Otherwise proceed normally.';

/**
 * Characters of a description shown in the index (the Agent Skills format's own limit for
 * `description`): a longer one is cut and ends with "…", so a package cannot fill the prompt.
 */
export const MAX_INDEX_DESCRIPTION_CHARS = 1024;

export interface SkillEntry {
  name: string;
  description: string;
}

/** Skills the host granted (resources.skills) then local packages, deduplicated by name. */
export function skillEntries(
  grants: readonly SkillGrant[] | null | undefined,
  local: readonly SkillPackage[],
): SkillEntry[] {
  const out: SkillEntry[] = [];
  const add = (name: unknown, description: unknown) => {
    if (typeof name === 'string' && name.trim() !== '' && !out.some((e) => e.name === name)) {
      out.push({ name, description: typeof description === 'string' ? description : '' });
    }
  };
  for (const g of grants ?? []) {
    if (g && typeof g === 'object') {
      add(g.skill_name, g.description);
    }
  }
  for (const s of local) {
    add(s.name, s.description);
  }
  return out;
}

/** The skills index system message, or null when there are no skills. */
export function buildSkillsMessage(entries: readonly SkillEntry[]): ChatMessage | null {
  if (entries.length === 0) {
    return null;
  }
  const blocks = entries.map((e) => {
    const lines = ['  <skill>', `    <name>${escapeXml(e.name)}</name>`];
    let description = e.description.replace(/\r?\n/g, ' ').trim();
    if (description.length > MAX_INDEX_DESCRIPTION_CHARS) {
      const cut = description.slice(0, MAX_INDEX_DESCRIPTION_CHARS - 1).replace(/[\ud800-\udbff]$/, '');
      description = `${cut}…`;
    }
    if (description !== '') {
      lines.push(`    <description>${escapeXml(description)}</description>`);
    }
    lines.push('  </skill>');
    return lines.join('\n');
  });
  return { role: 'system', content: `${HEADER}\n\n<available_skills>\n${blocks.join('\n')}\n</available_skills>` };
}

/** A result in the host's ToolResult shape, so the model reads the text as is. */
const textResult = (text: string, structured: JsonObject) => ({
  is_error: false,
  content: [{ type: 'text', text }],
  structured_content: structured,
});

function skillNamed(skills: readonly SkillPackage[], params: JsonObject): SkillPackage {
  const name = params.skill_name;
  const skill = skills.find((s) => s.name === name);
  if (!skill) {
    throw new Error(`Skill "${String(name)}" not found. Available skills: ${skills.map((s) => s.name).join(', ')}`);
  }
  return skill;
}

/** The local skill tools over loaded packages (none without packages). */
export function skillTools(skills: readonly SkillPackage[]): Map<string, LocalTool> {
  const tools = new Map<string, LocalTool>();
  if (skills.length === 0) {
    return tools;
  }
  const names = skills.map((s) => s.name);
  tools.set(ACTIVATE_TOOL, {
    definition: toolDefinition(ACTIVATE_TOOL, "Activate a skill: returns the skill's full instructions.", {
      type: 'object',
      properties: { skill_name: { type: 'string', enum: names, description: 'Name of the skill to activate' } },
      required: ['skill_name'],
    }),
    run: async (params) => {
      const skill = skillNamed(skills, params);
      const listing = await readSkillFile(skill, '.');
      const text =
        `<skill-activation>\n<skill-name>${skill.name}</skill-name>\n## Instructions\n${skill.instructions}\n` +
        `## Files\n${(listing.entries ?? []).join('\n')}\n</skill-activation>`;
      return textResult(text, { activated: true, skill_name: skill.name });
    },
  });
  tools.set(READ_SKILL_FILE_TOOL, {
    definition: toolDefinition(
      READ_SKILL_FILE_TOOL,
      'Read a file (or list a folder) of a skill, by a path relative to the skill folder.',
      {
        type: 'object',
        properties: {
          skill_name: { type: 'string', enum: names },
          path: { type: 'string', description: 'Relative path inside the skill, e.g. "references/guide.md" or "."' },
        },
        required: ['skill_name', 'path'],
      },
    ),
    run: (params) => readSkillFile(skillNamed(skills, params), typeof params.path === 'string' ? params.path : ''),
  });
  return tools;
}
