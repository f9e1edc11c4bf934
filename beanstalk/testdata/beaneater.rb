# Drives a beanstalkd server with beaneater, Ruby's beanstalkd client (the
# Debian package ruby-beaneater), as its users do.
#
#   ruby beaneater.rb HOST:PORT
#
# It prints one line per check and exits 1 if any failed.
require 'beaneater'

$failed = false

def check(name)
  yield
  puts "ok   #{name}"
rescue Exception => e
  $failed = true
  puts "FAIL #{name}: #{e.class}: #{e.message}"
  e.backtrace.first(4).each { |l| puts "     #{l}" }
end

def expect(ok, what)
  raise what unless ok
end

def times_out
  yield
  raise 'no TIMED_OUT'
rescue Beaneater::TimedOutError
end

addr = ARGV.fetch(0)
bs = Beaneater.new(addr)

check('put, reserve, delete') do
  t = bs.tubes['rb-prd']
  r = t.put('hello', pri: 1, ttr: 60)
  expect(r[:status] == 'INSERTED', "put: #{r}")
  job = t.reserve(1)
  expect(job.body == 'hello' && job.id.to_s == r[:id].to_s, "reserve: #{job}")
  expect(job.stats.state == 'reserved', "state #{job.stats.state}")
  job.delete
  expect(bs.jobs.find(job.id).nil?, 'a deleted job is found')
  times_out { t.reserve(0) }
end

check('delay') do
  t = bs.tubes['rb-delay']
  start = Time.now
  t.put('later', delay: 1)
  expect(t.peek(:delayed).body == 'later', 'peek-delayed')
  times_out { t.reserve(0) }
  job = t.reserve(5)
  expect(Time.now - start >= 1.0, "reserved after #{Time.now - start}s, before its delay")
  job.delete
end

check('priority order') do
  t = bs.tubes['rb-prio']
  [5, 1, 3, 1].each_with_index { |pri, i| t.put("#{pri}-#{i}", pri: pri) }
  got = 4.times.map { j = t.reserve(1); j.delete; j.body }
  expect(got == ['1-1', '1-3', '3-2', '5-0'], "order #{got}")
end

check('release with delay') do
  t = bs.tubes['rb-release']
  id = t.put('r', pri: 5)[:id]
  job = t.reserve(1)
  job.release(pri: 2, delay: 1)
  st = bs.jobs.find(id).stats
  expect(st.state == 'delayed' && st.pri == 2 && st.releases == 1, "stats #{st.state} #{st.pri} #{st.releases}")
  times_out { t.reserve(0) }
  again = t.reserve(5)
  expect(again.id.to_s == id.to_s, "reserved #{again.id}, want #{id}")
  again.delete
end

check('bury, kick') do
  t = bs.tubes['rb-bury']
  id = t.put('b')[:id]
  job = t.reserve(1)
  job.bury(pri: 9)
  expect(t.peek(:buried).id.to_s == id.to_s, 'peek-buried')
  r = t.kick(5)
  expect(r[:id] == '1', "kick: #{r}")
  st = bs.jobs.find(id).stats
  expect(st.state == 'ready' && st.buries == 1 && st.kicks == 1 && st.pri == 9, "stats #{st.state} #{st.buries} #{st.kicks}")
  id2 = t.put('c', delay: 100)[:id]
  bs.jobs.find(id2).kick
  expect(bs.jobs.find(id2).stats.state == 'ready', 'kick-job of a delayed job')
  2.times { t.reserve(1).delete }
end

check('TTR and DEADLINE_SOON') do
  t = bs.tubes['rb-ttr']
  id = t.put('t', ttr: 2)[:id]
  t.reserve(1)
  start = Time.now
  begin
    t.reserve(10)
    raise 'no DEADLINE_SOON'
  rescue Beaneater::DeadlineSoonError
  end
  took = Time.now - start
  expect(took > 0.5 && took < 1.8, "DEADLINE_SOON after #{took}s, want about 1s")
  other = Beaneater.new(addr)
  job = other.tubes['rb-ttr'].reserve(5)
  expect(job.id.to_s == id.to_s, "reserved #{job.id} after the TTR, want #{id}")
  expect(job.stats.timeouts == 1 && job.stats.reserves == 2, "timeouts #{job.stats.timeouts}")
  job.delete
  other.close
end

check('stats') do
  t = bs.tubes['rb-stats']
  t.put('a', pri: 1)
  t.put('b', pri: 2000)
  t.put('c', delay: 100)
  st = t.stats
  expect(st.name == 'rb-stats' && st.current_jobs_ready == 2 && st.current_jobs_urgent == 1 &&
         st.current_jobs_delayed == 1 && st.total_jobs == 3, "stats-tube #{st.inspect}")
  all = bs.stats
  expect(all.max_job_size == 65535 && all.current_connections >= 1 && all.cmd_put >= 3, "stats #{all.inspect}")
  names = bs.tubes.all.map(&:name)
  expect(names.include?('rb-stats') && names.include?('default'), "list-tubes #{names}")
  expect(bs.tubes.used.name == 'rb-stats', "list-tube-used #{bs.tubes.used.name}")
end

check('pause-tube') do
  t = bs.tubes['rb-pause']
  t.put('p')
  start = Time.now
  t.pause(1)
  job = t.reserve(5)
  expect(Time.now - start >= 0.9, "reserved from a paused tube after #{Time.now - start}s")
  job.delete
end

check('60 kB body') do
  t = bs.tubes['rb-big']
  body = (("0123456789\r\n\x00\xff".b) * 5000)[0, 60000]
  id = t.put(body)[:id]
  expect(bs.jobs.find(id).body.b == body, 'peek of a 60 kB body')
  job = t.reserve(1)
  expect(job.body.b == body, 'reserve of a 60 kB body')
  job.delete
  begin
    t.put('x' * 65536)
    raise 'no JOB_TOO_BIG'
  rescue Beaneater::JobTooBigError
  end
end

check('tube names beyond letters') do
  t = bs.tubes['rb/a+b(c)']
  t.put('n')
  expect(bs.tubes.all.map(&:name).include?('rb/a+b(c)'), 'list-tubes')
  t.reserve(1).delete
end

bs.close
exit($failed ? 1 : 0)
