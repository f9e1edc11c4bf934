package bench

import "fmt"

// Scenario is one kind of measurement. Its jobs are planned per structure
// (and per size, for most) by [Plan].
type Scenario struct {
	Name string
	// Doc says in a sentence what the scenario measures and how.
	Doc string

	jobs func(c *Config, sts []Structure) []Job
}

// Scenarios returns every scenario, in the order a run takes them.
func Scenarios() []Scenario {
	return []Scenario{
		scheduleCancelScenario,
		memoryScenario,
		fireScenario,
		parallelScenario,
		idleScenario,
		latenessScenario,
		burstScenario,
		structuresScenario,
		purgatoryScenario,
		gcScenario,
		keyedScenario,
		seedDemoScenario,
		serveScenario,
		beanstalkScenario,
		clusterScenario,
		workerScenario,
		pushScenario,
		keysScenario,
		historyScenario,
	}
}

// ScenarioDoc returns the Doc of the scenario called name, or "".
func ScenarioDoc(name string) string {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s.Doc
		}
	}
	return ""
}

// ScenarioNames returns the names of [Scenarios].
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return out
}

// skipFunc says why structure s does not run at size n, or "" if it does.
type skipFunc func(s Structure, n int) string

// randomDeadlines skips the sorted list above c.ListMax: with random
// deadlines each schedule walks half the list.
func randomDeadlines(c *Config) skipFunc {
	return func(s Structure, n int) string {
		if s.Name == "list" && n > c.ListMax {
			return fmt.Sprintf("skipped: sorted list schedules in O(n); run only up to n=%d", c.ListMax)
		}
		return ""
	}
}

// perSize plans one job per structure per size, in structure-major order
// so that rows of one structure stay together. A structure that skip
// rules out gets a job that returns the note at once.
func perSize(scenario string, sts []Structure, sizes []int, skip skipFunc, run func(s Structure, n int) Result) []Job {
	var jobs []Job
	for _, s := range sts {
		for _, n := range sizes {
			j := Job{Scenario: scenario, Structure: s.Name, N: n}
			if why := skip(s, n); why != "" {
				j.run = func() Result { return Result{Note: why} }
			} else {
				j.run = func() Result { return run(s, n) }
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// failed returns a Result for a run that could not finish.
func failed(err error) Result {
	return Result{Err: err.Error()}
}
