package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The command-line contract that scripts rely on, applied to every command of the tree
// at once so that no command can be added without it (contract_test.go walks the tree):
//
//   - an unknown subcommand, an argument a command does not take and an unknown flag end
//     with exit status 1 and a message naming the command whose --help says more;
//   - a command that only groups others, run alone, prints its help and exits 0, as
//     gpusplit alone does;
//   - gpusplit help TOPIC of an unknown topic is an error too, and so is help with -o
//     json: help is text, and a script that asked for JSON must not get it;
//   - an error whose typed reason a flag answers says so with the flag (ways.go).

// applyContract walks the tree under root. It runs once every command is added, cobra's
// own help and completion commands included, so that they follow it as well.
func applyContract(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(cmd, err)
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.Name() == "help" && c.HasParent():
			strictHelp(c)
		case c.HasSubCommands():
			// Without a Run, cobra prints the help of a group and exits 0 whatever
			// follows it, so gpusplit persist instal would succeed.
			if !c.Runnable() {
				c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
				if c.Annotations == nil {
					c.Annotations = map[string]string{}
				}
				c.Annotations[helpOnlyKey] = "true"
			}
			c.Args = subcommandArgs
		case c.Runnable():
			// A leaf that says nothing of its arguments takes none.
			if c.Args == nil {
				c.Args = cobra.NoArgs
			}
			c.Args = withUsage(c.Args)
		}
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return flagWays(run(cmd, args)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

const helpOnlyKey = "help-only"

// subcommandArgs refuses anything after a group's name that is not one of its commands.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		// Cobra's own default, which SuggestionsFor leaves to its caller.
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError(cmd, errors.New(msg))
}

// withUsage adds to an argument error of check the command whose help says more.
func withUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError(cmd, err)
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs(n) saying what the arguments are (want, with an
// example) instead of cobra's "accepts 2 arg(s), received 0".
func exactArgs(n int, want string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return errors.New(want)
		}
		return nil
	}
}

func usageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w: run '%s --help' for usage", err, cmd.CommandPath())
}

// strictHelp makes gpusplit help refuse a topic that is no command: cobra's prints
// "Unknown help topic" and the usage, and exits 0.
func strictHelp(help *cobra.Command) {
	run := help.Run
	help.Run = nil
	help.RunE = func(c *cobra.Command, args []string) error {
		if o := c.Flag("output"); o != nil && o.Value.String() == "json" {
			return fmt.Errorf("help has no JSON, only text: run %s without -o json", strings.Join(append([]string{"gpusplit help"}, args...), " "))
		}
		root := c.Root()
		found, rest, err := root.Find(args)
		if err == nil && len(rest) > 0 {
			// Find stops at the last command it knows and leaves the rest.
			err = subcommandArgs(found, rest)
		}
		if err != nil {
			return err
		}
		run(c, args)
		return nil
	}
}
