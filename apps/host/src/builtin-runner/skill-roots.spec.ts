import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { skillRoots } from './skill-roots';

describe('skillRoots: the skill packages of SKILLS_DIR', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skills-'));
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'outside-'));

  beforeAll(() => {
    for (const name of ['b-skill', 'a-skill']) {
      fs.mkdirSync(path.join(dir, name));
      fs.writeFileSync(path.join(dir, name, 'SKILL.md'), `---\nname: ${name}\n---\n`);
    }
    fs.mkdirSync(path.join(dir, 'no-manifest'));
    fs.mkdirSync(path.join(dir, 'manifest-is-a-folder', 'SKILL.md'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'loose-file.md'), 'not a skill');
    fs.writeFileSync(path.join(outside, 'SKILL.md'), '---\nname: escaped\n---\n');
    fs.symlinkSync(outside, path.join(dir, 'linked'));
  });

  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(outside, { recursive: true, force: true });
  });

  it('lists real subfolders holding a SKILL.md file, by name; no symlinks, no loose files', async () => {
    expect(await skillRoots(dir, () => undefined)).toEqual([path.join(dir, 'a-skill'), path.join(dir, 'b-skill')]);
  });

  it('has none without SKILLS_DIR, and warns when the folder cannot be read', async () => {
    const warnings: string[] = [];
    expect(await skillRoots(null, (w) => warnings.push(w))).toEqual([]);
    expect(await skillRoots(path.join(dir, 'missing'), (w) => warnings.push(w))).toEqual([]);
    expect(warnings).toEqual([expect.stringContaining('cannot be read')]);
  });
});
