# aai-gateway COM runner: the same program for every call. The steps and every value arrive
# as JSON on stdin; nothing here is built from them, so no value can become code.
$ErrorActionPreference = 'Stop'
$in = [Console]::OpenStandardInput()
$buffer = New-Object System.IO.MemoryStream
$in.CopyTo($buffer)
$request = [System.Text.Encoding]::UTF8.GetString($buffer.ToArray()) | ConvertFrom-Json

function Write-Reply($reply) {
    $text = ConvertTo-Json -InputObject $reply -Depth 16 -Compress
    $bytes = [System.Text.Encoding]::UTF8.GetBytes($text)
    $out = [Console]::OpenStandardOutput()
    $out.Write($bytes, 0, $bytes.Length)
    $out.Flush()
}

function ConvertTo-Plain($value) {
    if ($null -eq $value) { return $null }
    if ($value -is [System.__ComObject]) { return '[COM object]' }
    if ($value -is [datetime]) { return $value.ToString('o') }
    if ($value -is [string] -or $value -is [ValueType]) { return $value }
    if ($value -is [System.Collections.IEnumerable]) {
        return , @($value | ForEach-Object { ConvertTo-Plain $_ })
    }
    return [string]$value
}

function Get-List($items) {
    if ($null -eq $items) { return , [object[]]@() }
    return , [object[]]@($items)
}

$flags = [System.Reflection.BindingFlags]
$vars = @{}
$last = $null
$index = 0
try {
    foreach ($step in $request.steps) {
        $target = $null
        if ($null -ne $step.object) { $target = $vars[$step.object] }
        switch ($step.action) {
            'create' { $last = New-Object -ComObject $step.progid }
            'call' {
                $last = [System.__ComObject].InvokeMember($step.method, $flags::InvokeMethod, $null, $target, (Get-List $step.args))
            }
            'get' {
                $last = [System.__ComObject].InvokeMember($step.property, $flags::GetProperty, $null, $target, (Get-List $step.args))
            }
            'set' {
                [void][System.__ComObject].InvokeMember($step.property, $flags::SetProperty, $null, $target, [object[]]@(, $step.value))
                $last = $step.value
            }
            'return' {
                if ($null -ne $step.object) { $last = $target } else { $last = $step.value }
            }
        }
        if ($null -ne $step.var) { $vars[$step.var] = $last }
        $index++
    }
    Write-Reply @{ ok = $true; result = (ConvertTo-Plain $last) }
} catch {
    $e = $_.Exception
    while ($null -ne $e.InnerException) { $e = $e.InnerException }
    Write-Reply @{ ok = $false; step = $index; hresult = ('0x{0:X8}' -f $e.HResult); message = $e.Message }
    exit 1
}
