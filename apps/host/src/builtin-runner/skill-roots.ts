import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/**
 * The skill packages under SKILLS_DIR: its subfolders holding a SKILL.md (docs/local-agent.md#skills). Read for
 * every run, so a skill added or removed applies to the next run without a restart. Symbolic
 * links are not followed: a skill is a real folder inside SKILLS_DIR. The local agent loads and
 * confines each one itself; a folder it cannot read is left out with a warning.
 */
export async function skillRoots(dir: string | null, warn: (msg: string) => void): Promise<string[]> {
  if (!dir) {
    return [];
  }
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (e) {
    warn(`SKILLS_DIR ${dir} cannot be read: ${e instanceof Error ? e.message : String(e)}`);
    return [];
  }
  const roots: string[] = [];
  for (const entry of entries.filter((e) => e.isDirectory()).sort((a, b) => a.name.localeCompare(b.name))) {
    const root = path.join(dir, entry.name);
    const manifest = await fs.lstat(path.join(root, 'SKILL.md')).catch(() => null);
    if (manifest?.isFile()) {
      roots.push(root);
    }
  }
  return roots;
}
