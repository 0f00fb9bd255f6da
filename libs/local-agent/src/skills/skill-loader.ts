import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';

/*
 * Skill packages (docs/local-agent.md#skills): a folder with SKILL.md whose YAML front matter names the skill
 * and describes when to use it; the body is the instructions, and other files in the folder are
 * resources the model may read through the read-skill-file tool.
 */

export interface SkillPackage {
  name: string;
  description: string;
  /** Real path of the skill folder (symlinks resolved): the confinement root. */
  root: string;
  /** SKILL.md without its front matter. */
  instructions: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_SKILL_MD_BYTES = 256 * 1024;
const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

export class SkillLoadError extends Error {
  constructor(root: string, reason: string) {
    super(`skill ${root}: ${reason}`);
    this.name = 'SkillLoadError';
  }
}

/** Parses SKILL.md text: front matter `name` (letters, digits, . _ -) and non-empty `description`. */
export function parseSkillMarkdown(text: string, where: string): { name: string; description: string; body: string } {
  const m = FRONT_MATTER.exec(text.replace(/^\uFEFF/, ''));
  if (!m) {
    throw new SkillLoadError(where, 'SKILL.md must start with YAML front matter between --- lines');
  }
  let meta: unknown;
  try {
    meta = parseYaml(m[1]);
  } catch (e) {
    throw new SkillLoadError(where, `front matter is not valid YAML: ${(e as Error).message}`);
  }
  if (!meta || typeof meta !== 'object' || Array.isArray(meta)) {
    throw new SkillLoadError(where, 'front matter must be a mapping with name and description');
  }
  const { name, description } = meta as Record<string, unknown>;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new SkillLoadError(where, 'name: must be 1-64 letters, digits, ".", "_" or "-"');
  }
  if (typeof description !== 'string' || description.trim() === '') {
    throw new SkillLoadError(where, 'description: must be a non-empty string');
  }
  return { name, description: description.trim(), body: text.slice(m.index + m[0].length).replace(/^\s+/, '') };
}

type ParsedSkill = ReturnType<typeof parseSkillMarkdown>;
const MAX_PARSED_SKILLS = 256;
/** Parsed SKILL.md files by path, with the size/mtime/ctime/inode they were parsed at. */
const parsedSkills = new Map<string, { version: string; parsed: ParsedSkill }>();

/** Loads one skill folder. */
export async function loadSkill(dir: string): Promise<SkillPackage> {
  const root = await fs.realpath(dir).catch(() => {
    throw new SkillLoadError(dir, 'folder not found');
  });
  const file = path.join(root, 'SKILL.md');
  const stat = await fs.lstat(file).catch(() => {
    throw new SkillLoadError(dir, 'SKILL.md not found');
  });
  if (!stat.isFile()) {
    throw new SkillLoadError(dir, 'SKILL.md must be a regular file');
  }
  if (stat.size > MAX_SKILL_MD_BYTES) {
    throw new SkillLoadError(dir, `SKILL.md is larger than ${MAX_SKILL_MD_BYTES} bytes`);
  }
  // Skills load at the start of every run: an unchanged SKILL.md is not read and parsed again.
  const version = `${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}:${stat.ino}`;
  const known = parsedSkills.get(file);
  const parsed = known?.version === version ? known.parsed : parseSkillMarkdown(await fs.readFile(file, 'utf8'), dir);
  if (known?.version !== version) {
    parsedSkills.delete(file);
    parsedSkills.set(file, { version, parsed });
    if (parsedSkills.size > MAX_PARSED_SKILLS) {
      parsedSkills.delete(parsedSkills.keys().next().value!);
    }
  }
  return { name: parsed.name, description: parsed.description, root, instructions: parsed.body };
}

/** Loads every folder; broken ones are reported through `warn` and left out, the first of a name wins. */
export async function loadSkills(dirs: readonly string[], warn: (m: string) => void): Promise<SkillPackage[]> {
  const loaded = await Promise.all(
    dirs.map((d) =>
      loadSkill(d).catch((e: unknown) => {
        warn(e instanceof Error ? e.message : String(e));
        return null;
      }),
    ),
  );
  const out: SkillPackage[] = [];
  for (const s of loaded) {
    if (s && !out.some((o) => o.name === s.name)) {
      out.push(s);
    } else if (s) {
      warn(`skill ${s.root}: name ${s.name} is already used by another skill; skipped`);
    }
  }
  return out;
}
